Y visitó Jehová á Sara, como había dicho, é hizo Jehová con Sara como había hablado.
Y concibió y parió Sara á Abraham un hijo en su vejez, en el tiempo que Dios le había dicho.
Y llamó Abraham el nombre de su hijo que le nació, que le parió Sara, Isaac.
Y circuncidó Abraham á su hijo Isaac de ocho días, como Dios le había mandado.
Y era Abraham de cien años, cuando le nació Isaac su hijo.
Entonces dijo Sara: Dios me ha hecho reir, y cualquiera que lo oyere, se reirá conmigo.
Y añadió: ¿Quién dijera á Abraham que Sara había de dar de mamar á hijos? pues que le he parido un hijo á su vejez.
Y creció el niño, y fué destetado; é hizo Abraham gran banquete el día que fué destetado Isaac.
Y vió Sara al hijo de Agar la Egipcia, el cual había ésta parido á Abraham, que se burlaba.
Por tanto dijo á Abraham: Echa á esta sierva y á su hijo; que el hijo de esta sierva no ha de heredar con mi hijo, con Isaac.
Este dicho pareció grave en gran manera á Abraham á causa de su hijo.
Entonces dijo Dios á Abraham: No te parezca grave á causa del muchacho y de tu sierva; en todo lo que te dijere Sara, oye su voz, porque en Isaac te será llamada descendencia.
Y también al hijo de la sierva pondré en gente, porque es tu simiente.
Entonces Abraham se levantó muy de mañana, y tomó pan, y un odre de agua, y diólo á Agar, poniéndolo sobre su hombro, y entrególe el muchacho, y despidióla. Y ella partió, y andaba errante por el desierto de Beer-seba.
Y faltó el agua del odre, y echó al muchacho debajo de un árbol;
Y fuése y sentóse enfrente, alejándose como un tiro de arco; porque decía: No veré cuando el muchacho morirá: y sentóse enfrente, y alzó su voz y lloró.
Y oyó Dios la voz del muchacho; y el ángel de Dios llamó á Agar desde el cielo, y le dijo: ¿Qué tienes, Agar? No temas; porque Dios ha oído la voz del muchacho en donde está.
Levántate, alza al muchacho, y ásele de tu mano, porque en gran gente lo tengo de poner.
Entonces abrió Dios sus ojos, y vió una fuente de agua; y fué, y llenó el odre de agua, y dió de beber al muchacho.
Y fué Dios con el muchacho; y creció, y habitó en el desierto, y fué tirador de arco.
Y habitó en el desierto de Parán; y su madre le tomó mujer de la tierra de Egipto.
Y aconteció en aquel mismo tiempo que habló Abimelech, y Phicol, príncipe de su ejército, á Abraham diciendo: Dios es contigo en todo cuanto haces:
Ahora pues, júrame aquí por Dios, que no faltarás á mí, ni á mi hijo, ni á mi nieto; sino que conforme á la bondad que yo hice contigo, harás tú conmigo, y con la tierra donde has peregrinado.
Y respondió Abraham: Yo juraré.
Y Abraham reconvino á Abimelech á causa de un pozo de agua, que los siervos de Abimelech le habían quitado.
Y respondió Abimelech: No sé quién haya hecho esto, ni tampoco tú me lo hiciste saber, ni yo lo he oído hasta hoy.
Y tomó Abraham ovejas y vacas, y dió á Abimelech; é hicieron ambos alianza.
Y puso Abraham siete corderas del rebaño aparte.
Y dijo Abimelech á Abraham: ¿Qué significan esas siete corderas que has puesto aparte?
Y él respondió: Que estas siete corderas tomarás de mi mano, para que me sean en testimonio de que yo cavé este pozo.
Por esto llamó á aquel lugar Beer-seba; porque allí juraron ambos.
Así hicieron alianza en Beer-seba: y levantóse Abimelech, y Phicol, príncipe de su ejército, y se volvieron á tierra de los Filisteos.
Y plantó Abraham un bosque en Beer-seba, é invocó allí el nombre de Jehová Dios eterno.
Y moró Abraham en tierra de los Filisteos muchos días.
Y aconteció después de estas cosas, que tentó Dios á Abraham, y le dijo: Abraham. Y él respondió: Heme aquí.
Y dijo: Toma ahora tu hijo, tu único, Isaac, á quien amas, y vete á tierra de Moriah, y ofrécelo allí en holocausto sobre uno de los montes que yo te diré.
Y Abraham se levantó muy de mañana, y enalbardó su asno, y tomó consigo dos mozos suyos, y á Isaac su hijo: y cortó leña para el holocausto, y levantóse, y fué al lugar que Dios le dijo.
Al tercer día alzó Abraham sus ojos, y vió el lugar de lejos.
Entonces dijo Abraham á sus mozos: Esperaos aquí con el asno, y yo y el muchacho iremos hasta allí, y adoraremos, y volveremos á vosotros.
Y tomó Abraham la leña del holocausto, y púsola sobre Isaac su hijo: y él tomó en su mano el fuego y el cuchillo; y fueron ambos juntos.
Entonces habló Isaac á Abraham su padre, y dijo: Padre mío. Y él respondió: Heme aquí, mi hijo. Y él dijo: He aquí el fuego y la leña; mas ¿dónde está el cordero para el holocausto?
Y respondió Abraham: Dios se proveerá de cordero para el holocausto, hijo mío. E iban juntos.
Y como llegaron al lugar que Dios le había dicho, edificó allí Abraham un altar, y compuso la leña, y ató á Isaac su hijo, y púsole en el altar sobre la leña.
Y extendió Abraham su mano, y tomó el cuchillo, para degollar á su hijo.
Entonces el ángel de Jehová le dió voces del cielo, y dijo: Abraham, Abraham. Y él respondió: Heme aquí.
Y dijo: No extiendas tu mano sobre el muchacho, ni le hagas nada; que ya conozco que temes á Dios, pues que no me rehusaste tu hijo, tu único.
Entonces alzó Abraham sus ojos, y miró, y he aquí un carnero á sus espaldas trabado en un zarzal por sus cuernos: y fué Abraham, y tomó el carnero, y ofrecióle en holocausto en lugar de su hijo.
Y llamó Abraham el nombre de aquel lugar, Jehová proveerá. Por tanto se dice hoy: En el monte de Jehová será provisto.
Y llamó el ángel de Jehová á Abraham segunda vez desde el cielo,
Y dijo: Por mí mismo he jurado, dice Jehová, que por cuanto has hecho esto, y no me has rehusado tu hijo, tu único;
Bendiciendo te bendeciré, y multiplicando multiplicaré tu simiente como las estrellas del cielo, y como la arena que está á la orilla del mar; y tu simiente poseerá las puertas de sus enemigos:
En tu simiente serán benditas todas las gentes de la tierra, por cuanto obedeciste á mi voz.
Y tornóse Abraham á sus mozos, y levantáronse y se fueron juntos á Beer-seba; y habitó Abraham en Beer-seba.
Y aconteció después de estas cosas, que fué dada nueva á Abraham, diciendo: He aquí que también Milca ha parido hijos á Nachôr tu hermano:
A Huz su primogénito, y á Buz su hermano, y á Kemuel padre de Aram,
Y á Chêsed, y á Hazo, y á Pildas, y á Jidlaph, y á Bethuel.
Y Bethuel engendró á Rebeca. Estos ocho parió Milca á Nachôr, hermano de Abraham.
Y su concubina, que se llamaba Reúma, parió también á Teba, y á Gaham, y á Taas, y á Maachâ.
Y habló Jehová á Moisés, diciendo:
Cuando una persona pecare, é hiciere prevaricación contra Jehová, y negare á su prójimo lo encomendado, ó dejado en su mano, ó bien robare, ó calumniare á su prójimo;
O sea que hallando lo perdido, después lo negare, y jurare en falso, en alguna de todas aquellas cosas en que suele pecar el hombre:
Entonces será que, puesto habrá pecado y ofendido, restituirá aquello que robó, ó por el daño de la calumnia, ó el depósito que se le encomendó, ó lo perdido que halló,
O todo aquello sobre que hubiere jurado falsamente; lo restituirá, pues, por entero, y añadirá á ello la quinta parte, que ha de pagar á aquel á quien pertenece en el día de su expiación.
Y por su expiación traerá á Jehová un carnero sin tacha de los rebaños, conforme á tu estimación, al sacerdote para la expiación:
Y el sacerdote hará expiación por él delante de Jehová, y obtendrá perdón de cualquiera de todas las cosas en que suele ofender.
Habló aún Jehová á Moisés, diciendo:
Manda á Aarón y á sus hijos diciendo: Esta es la ley del holocausto: (es holocausto, porque se quema sobre el altar toda la noche hasta la mañana, y el fuego del altar arderá en él:)
El sacerdote se pondrá su vestimenta de lino, y se vestirá pañetes de lino sobre su carne; y cuando el fuego hubiere consumido el holocausto, apartará él las cenizas de sobre el altar, y pondrálas junto al altar.
Después se desnudará de sus vestimentas, y se pondrá otras vestiduras, y sacará las cenizas fuera del real al lugar limpio.
Y el fuego encendido sobre el altar no ha de apagarse, sino que el sacerdote pondrá en él leña cada mañana, y acomodará sobre él el holocausto, y quemará sobre él los sebos de las paces.
El fuego ha de arder continuamente en el altar; no se apagará.
Y esta es la ley del presente: Han de ofrecerlo los hijos de Aarón delante de Jehová, delante del altar.
Y tomará de él un puñado de la flor de harina del presente, y de su aceite, y todo el incienso que está sobre el presente, y harálo arder sobre el altar por memoria, en olor suavísimo á Jehová.
Y el sobrante de ella lo comerán Aarón y sus hijos: sin levadura se comerá en el lugar santo; en el atrio del tabernáculo del testimonio lo comerán.
No se cocerá con levadura: helo dado á ellos por su porción de mis ofrendas encendidas; es cosa santísima, como la expiación por el pecado, y como la expiación por la culpa.
Todos los varones de los hijos de Aarón comerán de ella. Estatuto perpetuo será para vuestras generaciones tocante á las ofrendas encendidas de Jehová: toda cosa que tocare en ellas será santificada.
Y habló Jehová á Moisés, diciendo:
Esta es la ofrenda de Aarón y de sus hijos, que ofrecerán á Jehová el día que serán ungidos: la décima parte de un epha de flor de harina, presente perpetuo, la mitad á la mañana y la mitad á la tarde.
En sartén se aderezará con aceite; frita la traerás, y los pedazos cocidos del presente ofrecerás á Jehová en olor de suavidad.
Y el sacerdote que en lugar de Aarón fuere ungido de entre sus hijos, hará la ofrenda; estatuto perpetuo de Jehová: toda ella será quemada.
Y todo presente de sacerdote será enteramente quemado; no se comerá.
Y habló Jehová á Moisés, diciendo:
Habla á Aarón y á sus hijos, diciendo: Esta es la ley de la expiación: en el lugar donde será degollado el holocausto, será degollada la expiación por el pecado delante de Jehová: es cosa santísima.
El sacerdote que la ofreciere por expiación, la comerá: en el lugar santo será comida, en el atrio del tabernáculo del testimonio.
Todo lo que en su carne tocare, será santificado; y si cayere de su sangre sobre el vestido, lavarás aquello sobre que cayere, en el lugar santo.
Y la vasija de barro en que fuere cocida, será quebrada: y si fuere cocida en vasija de metal, será fregada y lavada con agua.
Todo varón de entre los sacerdotes la comerá: es cosa santísima.
Mas no se comerá de expiación alguna, de cuya sangre se metiere en el tabernáculo del testimonio para reconciliar en el santuario: al fuego será quemada.
Y habló Jehová á Moisés y á Aarón, diciendo:
Cuando el hombre tuviere en la piel de su carne hinchazón, ó postilla, ó mancha blanca, y hubiere en la piel de su carne como llaga de lepra, será traído á Aarón el sacerdote, ó á uno de los sacerdotes sus hijos:
Y el sacerdote mirará la llaga en la piel de la carne: si el pelo en la llaga se ha vuelto blanco, y pareciere la llaga más hundida que la tez de la carne, llaga de lepra es; y el sacerdote le reconocerá, y le dará por inmundo.
Y si en la piel de su carne hubiere mancha blanca, pero no pareciere más hundida que la tez, ni su pelo se hubiere vuelto blanco, entonces el sacerdote encerrará al llagado por siete días;
Y al séptimo día el sacerdote lo mirará; y si la llaga á su parecer se hubiere estancado, no habiéndose extendido en la piel, entonces el sacerdote le volverá á encerrar por otros siete días.
Y al séptimo día el sacerdote le reconocerá de nuevo; y si parece haberse oscurecido la llaga, y que no ha cundido en la piel, entonces el sacerdote lo dará por limpio: era postilla; y lavará sus vestidos, y será limpio.
Mas si hubiere ido creciendo la postilla en la piel, después que fué mostrado al sacerdote para ser limpio, será visto otra vez del sacerdote:
Y si reconociéndolo el sacerdote, ve que la postilla ha crecido en la piel, el sacerdote lo dará por inmundo: es lepra.
Cuando hubiere llaga de lepra en el hombre, será traído al sacerdote;
Y el sacerdote mirará, y si pareciere tumor blanco en la piel, el cual haya mudado el color del pelo, y se descubre asimismo la carne viva,
Lepra es envejecida en la piel de su carne; y le dará por inmundo el sacerdote, y no le encerrará, porque es inmundo.
Mas si brotare la lepra cundiendo por el cutis, y ella cubriere toda la piel del llagado desde su cabeza hasta sus pies, á toda vista de ojos del sacerdote;
Entonces el sacerdote le reconocerá; y si la lepra hubiere cubierto toda su carne, dará por limpio al llagado: hase vuelto toda ella blanca; y él es limpio.
Mas el día que apareciere en él la carne viva, será inmundo.
Y el sacerdote mirará la carne viva, y lo dará por inmundo. Es inmunda la carne viva: es lepra.
Mas cuando la carne viva se mudare y volviere blanca, entonces vendrá al sacerdote;
Y el sacerdote mirará, y si la llaga se hubiere vuelto blanca, el sacerdote dará por limpio al que tenía la llaga, y será limpio.
Y cuando en la carne, en su piel, hubiere apostema, y se sanare,
Y sucediere en el lugar de la apostema tumor blanco, ó mancha blanca embermejecida, será mostrado al sacerdote:
Y el sacerdote mirará; y si pareciere estar más baja que su piel, y su pelo se hubiere vuelto blanco, darálo el sacerdote por inmundo: es llaga de lepra que se originó en la apostema.
Y si el sacerdote la considerare, y no pareciere en ella pelo blanco, ni estuviere más baja que la piel, sino oscura, entonces el sacerdote lo encerrará por siete días:
Y si se fuere extendiendo por la piel, entonces el sacerdote lo dará por inmundo: es llaga.
Empero si la mancha blanca se estuviere en su lugar, que no haya cundido, es la costra de la apostema; y el sacerdote lo dará por limpio.
Asimismo cuando la carne tuviere en su piel quemadura de fuego, y hubiere en lo sanado del fuego mancha blanquecina, bermejiza ó blanca,
El sacerdote la mirará; y si el pelo se hubiere vuelto blanco en la mancha, y pareciere estar más hundida que la piel, es lepra que salió en la quemadura; y el sacerdote declarará al sujeto inmundo, por ser llaga de lepra.
Mas si el sacerdote la mirare, y no pareciere en la mancha pelo blanco, ni estuviere más baja que la tez, sino que está oscura, le encerrará el sacerdote por siete días;
Y al séptimo día el sacerdote la reconocerá: si se hubiere ido extendiendo por la piel, el sacerdote lo dará por inmundo: es llaga de lepra.
Empero si la mancha se estuviere en su lugar, y no se hubiere extendido en la piel, sino que está oscura, hinchazón es de la quemadura: darálo el sacerdote por limpio; que señal de la quemadura es.
Y al hombre ó mujer que le saliere llaga en la cabeza, ó en la barba,
El sacerdote mirará la llaga; y si pareciere estar más profunda que la tez, y el pelo en ella fuera rubio y adelgazado, entonces el sacerdote lo dará por inmundo: es tiña, es lepra de la cabeza ó de la barba.
Mas cuando el sacerdote hubiere mirado la llaga de la tiña, y no pareciere estar más profunda que la tez, ni fuere en ella pelo negro, el sacerdote encerrará al llagado de la tiña por siete días:
Y al séptimo día el sacerdote mirará la llaga: y si la tiña no pareciere haberse extendido, ni hubiere en ella pelo rubio, ni pareciere la tiña más profunda que la tez,
Entonces lo trasquilarán, mas no trasquilarán el lugar de la tiña: y encerrará el sacerdote al que tiene la tiña por otros siete días.
Y al séptimo día mirará el sacerdote la tiña; y si la tiña no hubiere cundido en la piel, ni pareciere estar más profunda que la tez, el sacerdote lo dará por limpio; y lavará sus vestidos, y será limpio.
Empero si la tiña se hubiere ido extendiendo en la piel después de su purificación,
Entonces el sacerdote la mirará; y si la tiña hubiere cundido en la piel, no busque el sacerdote el pelo rubio, es inmundo.
Mas si le pareciere que la tiña está detenida, y que ha salido en ella el pelo negro, la tiña está sanada; él está limpio, y por limpio lo dará el sacerdote.
Asimismo el hombre ó mujer, cuando en la piel de su carne tuviere manchas, manchas blancas,
El sacerdote mirará: y si en la piel de su carne parecieren manchas blancas algo oscurecidas, es empeine que brotó en la piel, está limpia la persona.
Y el hombre, cuando se le pelare la cabeza, es calvo, mas limpio.
Y si á la parte de su rostro se le pelare la cabeza, es calvo por delante, pero limpio.
Mas cuando en la calva ó en la antecalva hubiere llaga blanca rojiza, lepra es que brota en su calva ó en su antecalva.
Entonces el sacerdote lo mirará, y si pareciere la hinchazón de la llaga blanca rojiza en su calva ó en su antecalva, como el parecer de la lepra de la tez de la carne,
Leproso es, es inmundo; el sacerdote lo dará luego por inmundo; en su cabeza tiene su llaga.
Y el leproso en quien hubiere llaga, sus vestidos serán deshechos y su cabeza descubierta, y embozado pregonará: ¡Inmundo! ¡inmundo!
Todo el tiempo que la llaga estuviere en él, será inmundo; estará impuro: habitará solo; fuera del real será su morada.
Y cuando en el vestido hubiere plaga de lepra, en vestido de lana, ó en vestido de lino;
O en estambre ó en trama, de lino ó de lana, ó en piel, ó en cualquiera obra de piel;
Y que la plaga sea verde, ó bermeja, en vestido ó en piel, ó en estambre ó en trama, ó en cualquiera obra de piel; plaga es de lepra, y se ha de mostrar al sacerdote.
Y el sacerdote mirará la plaga, y encerrará la cosa plagada por siete días.
Y al séptimo día mirará la plaga: y si hubiere cundido la plaga en el vestido, ó estambre, ó en la trama, ó en piel, ó en cualquiera obra que se hace de pieles, lepra roedora es la plaga; inmunda será.
Será quemado el vestido, ó estambre ó trama, de lana ó de lino, ó cualquiera obra de pieles en que hubiere tal plaga; porque lepra roedora es: al fuego será quemada.
Y si el sacerdote mirare, y no pareciere que la plaga se haya extendido en el vestido, ó estambre, ó en la trama, ó en cualquiera obra de pieles;
Entonces el sacerdote mandará que laven donde está la plaga, y lo encerrará otra vez por siete días.
Y el sacerdote mirará después que la plaga fuere lavada; y si pareciere que la plaga no ha mudado su aspecto, bien que no haya cundido la plaga, inmunda es; la quemarás al fuego; corrosión es penetrante, esté lo raído en la haz ó en el revés de aquella cosa.
Mas si el sacerdote la viere, y pareciere que la plaga se ha oscurecido después que fué lavada, la cortará del vestido, ó de la piel, ó del estambre, ó de la trama.
Y si apareciere más en el vestido, ó estambre, ó trama, ó en cualquiera cosa de pieles, reverdeciendo en ella, quemarás al fuego aquello donde estuviere la plaga.
Empero el vestido, ó estambre, ó trama, ó cualquiera cosa de piel que lavares, y que se le quitare la plaga, lavarse ha segunda vez, y entonces será limpia.
Esta es la ley de la plaga de la lepra del vestido de lana ó de lino, ó del estambre, ó de la trama, ó de cualquiera cosa de piel, para que sea dada por limpia ó por inmunda.
Mas el séptimo año se animó Joiada, y tomó consigo en alianza á los centuriones, Azarías hijo de Jeroam, y á Ismael hijo de Johanán, y á Azarías hijo de Obed, y á Maasías hijo de Adaías, y á Elisaphat hijo de Zichri;
Los cuales rodeando por Judá, juntaron los Levitas de todas las ciudades de Judá, y á los príncipes de las familias de Israel, y vinieron á Jerusalem.
Y toda la multitud hizo alianza con el rey en la casa de Dios. Y él les dijo: He aquí el hijo del rey, el cual reinará, como Jehová lo tiene dicho de los hijos de David.
Lo que habéis de hacer es: la tercera parte de vosotros, los que entran de semana, estarán de porteros con los sacerdotes y los Levitas;
Y la tercera parte, á la casa del rey; y la tercera parte, á la puerta del fundamento: y todo el pueblo estará en los patios de la casa de Jehová.
Y ninguno entre en la casa de Jehová, sino los sacerdotes y Levitas que sirven: éstos entrarán, porque están consagrados; y todo el pueblo hará la guardia de Jehová.
Y los Levitas rodearán al rey por todas partes, y cada uno tendrá sus armas en la mano; y cualquiera que entrare en la casa, muera: y estaréis con el rey cuando entrare, y cuando saliere.
Y los Levitas y todo Judá lo hicieron todo como lo había mandado el sacerdote Joiada: y tomó cada uno los suyos, los que entraban de semana, y los que salían el sábado: porque el sacerdote Joiada no dió licencia á las compañías.
Dió también el sacerdote Joiada á los centuriones las lanzas, paveses y escudos que habían sido del rey David, que estaban en la casa de Dios;
Y puso en orden á todo el pueblo, teniendo cada uno su espada en la mano, desde el rincón derecho del templo hasta el izquierdo, hacia el altar y la casa, en derredor del rey por todas partes.
Entonces sacaron al hijo del rey, y pusiéronle la corona y el testimonio, é hiciéronle rey; y Joiada y sus hijos le ungieron, diciendo luego: ¡Viva el rey!
Y como Athalía oyó el estruendo de la gente que corría, y de los que bendecían al rey, vino al pueblo á la casa de Jehová;
Y mirando, vió al rey que estaba junto á su columna á la entrada, y los príncipes y los trompetas junto al rey, y que todo el pueblo de la tierra hacía alegrías, y sonaban bocinas, y cantaban con instrumentos de música los que sabían alabar. Entonces Athalía rasgó sus vestidos, y dijo: ¡Conjuración, conjuración!
Y sacando el pontífice Joiada los centuriones y capitanes del ejército, díjoles: Sacadla fuera del recinto; y el que la siguiere, muera á cuchillo: porque el sacerdote había mandado que no la matasen en la casa de Jehová.
Ellos pues le echaron mano, y luego que hubo ella pasado la entrada de la puerta de los caballos de la casa del rey, allí la mataron.
Y Joiada hizo pacto entre sí y todo el pueblo y el rey, que serían pueblo de Jehová.
Después de esto entró todo el pueblo en el templo de Baal, y derribáronlo, y también sus altares; é hicieron pedazos sus imágenes, y mataron delante de los altares á Mathán, sacerdote de Baal.
Luego ordenó Joiada los oficios en la casa de Jehová bajo la mano de los sacerdotes y Levitas, según David los había distribuído en la casa de Jehová, para ofrecer á Jehová los holocaustos, como está escrito en la ley de Moisés, con gozo y cantares, conforme á la ordenación de David.
Puso también porteros á las puertas de la casa de Jehová, para que por ninguna vía entrase ningún inmundo.
Tomó después los centuriones, y los principales, y los que gobernaban el pueblo; y á todo el pueblo de la tierra, y llevó al rey de la casa de Jehová; y viniendo hasta el medio de la puerta mayor de la casa del rey, sentaron al rey sobre el trono del reino.
Y todo el pueblo del país hizo alegrías: y la ciudad estuvo quieta, muerto que hubieron á Athalía á cuchillo.
Y fué que habiendo oído Sanballat, y Tobías, y Gesem el Arabe, y los demás nuestros enemigos, que había yo edificado el muro, y que no quedaba en él portillo, (aunque hasta aquel tiempo no había puesto en las puertas las hojas,)
Sanballat y Gesem enviaron á decirme: Ven, y compongámonos juntos en alguna de las aldeas en el campo de Ono. Mas ellos habían pensado hacerme mal.
Y enviéles mensajeros, diciendo: Yo hago una grande obra, y no puedo ir; porque cesaría la obra, dejándola yo para ir á vosotros.
Y enviaron á mí con el mismo asunto por cuatro veces, y yo les respondí de la misma manera.
Envió entonces Sanballat á mí su criado, á decir lo mismo por quinta vez, con una carta abierta en su mano,
En la cual estaba escrito: Hase oído entre las gentes, y Gasmu lo dice, que tú y los Judíos pensáis rebelaros; y que por eso edificas tú el muro, con la mira, según estas palabras, de ser tú su rey;
Y que has puesto profetas que prediquen de ti en Jerusalem, diciendo: ¡Rey en Judá! Y ahora serán oídas del rey las tales palabras: ven por tanto, y consultemos juntos.
Entonces envié yo á decirle: No hay tal cosa como dices, sino que de tu corazón tú lo inventas.
Porque todos ellos nos ponían miedo, diciendo: Debilitaránse las manos de ellos en la obra, y no será hecha. Esfuerza pues mis manos, oh Dios.
Vine luego en secreto á casa de Semaías hijo de Delaías, hijo de Mehetabeel, porque él estaba encerrado; el cual me dijo: Juntémonos en la casa de Dios dentro del templo, y cerremos las puertas del templo, porque vienen para matarte; sí, esta noche vendrán á matarte.
Entonces dije: ¿Un hombre como yo ha de huir? ¿y quién, que como yo fuera, entraría al templo para salvar la vida? No entraré.
Y entendí que Dios no lo había enviado, sino que hablaba aquella profecía contra mí, porque Tobías y Sanballat le habían alquilado por salario.
Porque sobornado fué para hacerme temer así, y que pecase, y les sirviera de mal nombre con que fuera yo infamado.
Acuérdate, Dios mío, de Tobías y de Sanballat, conforme á estas sus obras, y también de Noadías profetisa, y de los otros profetas que hacían por ponerme miedo.
Acabóse pues el muro el veinticinco del mes de Elul, en cincuenta y dos días.
Y como lo oyeron todos nuestros enemigos, temieron todas las gentes que estaban en nuestros alrededores, y abatiéronse mucho sus ojos, y conocieron que por nuestro Dios había sido hecha esta obra.
Asimismo en aquellos días iban muchas cartas de los principales de Judá á Tobías, y las de Tobías venían á ellos.
Porque muchos en Judá se habían conjurado con él, porque era yerno de Sechânías hijo de Ara; y Johanán su hijo había tomado la hija de Mesullam, hijo de Berechîas.
También contaban delante de mí sus buenas obras, y referíanle mis palabras. Y enviaba Tobías cartas para atemorizarme.
Salmo de David. A ti clamaré, oh Jehová, fortaleza mía: no te desentiendas de mí; porque no sea yo, dejándome tú, semejante á los que descienden al sepulcro.
Oye la voz de mis ruegos cuando clamo á ti, cuando alzo mis manos hacia el templo de tu santidad.
No me arrebates á una con los malos, y con los que hacen iniquidad: los cuales hablan paz con sus prójimos, y la maldad está en su corazón.
Dales conforme á su obra, y conforme á la malicia de sus hechos: dales conforme á la obra de sus manos, dales su paga.
Porque no atendieron á las obras de Jehová, ni al hecho de sus manos, derribarálos, y no los edificará.
Bendito Jehová, que oyó la voz de mis ruegos.
Jehová es mi fortaleza y mi escudo: en él esperó mi corazón, y fuí ayudado; por lo que se gozó mi corazón, y con mi canción le alabaré.
Jehová es su fuerza, y la fortaleza de las saludes de su ungido.
Salva á tu pueblo, y bendice á tu heredad; y pastoréalos y ensálzalos para siempre.
Alegraos, justos, en Jehová: á los rectos es hermosa la alabanza.
Celebrad á Jehová con arpa: cantadle con salterio y decacordio.
Cantadle canción nueva: hacedlo bien tañendo con júbilo.
Porque recta es la palabra de Jehová, y toda su obra con verdad hecha.
El ama justicia y juicio: de la misericordia de Jehová está llena la tierra.
Por la palabra de Jehová fueron hechos los cielos, y todo el ejército de ellos por el espíritu de su boca.
El junta como en un montón las aguas de la mar: él pone en depósitos los abismos.
Tema á Jehová toda la tierra: teman de él todos los habitadores del mundo.
Porque él dijo, y fué hecho; él mandó, y existió.
Jehová hace nulo el consejo de las gentes, y frustra las maquinaciones de los pueblos.
El consejo de Jehová permanecerá para siempre; los pensamientos de su corazón por todas las generaciones.
Bienaventurada la gente de que Jehová es su Dios; el pueblo á quien escogió por heredad para sí.
Desde los cielos miró Jehová; vió á todos los hijos de los hombres:
Desde la morada de su asiento miró sobre todos los moradores de la tierra.
El formó el corazón de todos ellos; él considera todas sus obras.
El rey no es salvo con la multitud del ejército: no escapa el valiente por la mucha fuerza.
Vanidad es el caballo para salvarse: por la grandeza de su fuerza no librará.
He aquí, el ojo de Jehová sobre los que le temen, sobre los que esperan en su misericordia;
Para librar sus almas de la muerte, y para darles vida en el hambre.
Nuestra alma esperó á Jehová; nuestra ayuda y nuestro escudo es él.
Por tanto en él se alegrará nuestro corazón, porque en su santo nombre hemos confiado.
Sea tu misericordia, oh Jehová, sobre nosotros, como esperamos en ti.
Amo á Jehová, pues ha oído mi voz y mis súplicas.
Porque ha inclinado á mí su oído, invocaréle por tanto en todos mis días.
Rodeáronme los dolores de la muerte, me encontraron las angustias del sepulcro: angustia y dolor había yo hallado.
Entonces invoqué el nombre de Jehová, diciendo: Libra ahora, oh Jehová, mi alma.
Clemente es Jehová y justo; sí, misericordioso es nuestro Dios.
Jehová guarda á los sinceros: estaba yo postrado, y salvóme.
Vuelve, oh alma mía, á tu reposo; porque Jehová te ha hecho bien.
Pues tú has librado mi alma de la muerte, mis ojos de lágrimas, y mis pies de desbarrar.
Andaré delante de Jehová en la tierra de los vivientes.
Creí; por tanto hablé, estando afligido en gran manera.
Y dije en mi apresuramiento: Todo hombre es mentiroso.
¿Qué pagaré á Jehová por todos sus beneficios para conmigo?
Tomaré la copa de la salud, é invocaré el nombre de Jehová.
Ahora pagaré mis votos á Jehová delante de todo su pueblo.
Estimada es en los ojos de Jehová la muerte de sus santos.
Oh Jehová, que yo soy tu siervo, yo tu siervo, hijo de tu sierva: rompiste mis prisiones.
Te ofreceré sacrificio de alabanza, é invocaré el nombre de Jehová.
A Jehová pagaré ahora mis votos delante de todo su pueblo;
En los atrios de la casa de Jehová, en medio de ti, oh Jerusalem. Aleluya.
Y acuérdate de tu Criador en los días de tu juventud, antes que vengan los malos días, y lleguen los años, de los cuales digas, No tengo en ellos contentamiento;
Antes que se oscurezca el sol, y la luz, y la luna y las estrellas, y las nubes se tornen tras la lluvia:
Cuando temblarán los guardas de la casa, y se encorvarán los hombres fuertes, y cesarán las muelas, porque han disminuído, y se oscurecerán los que miran por las ventanas;
Y las puertas de afuera se cerrarán, por la bajeza de la voz de la muela; y levantaráse á la voz del ave, y todas las hijas de canción serán humilladas;
Cuando también temerán de lo alto, y los tropezones en el camino; y florecerá el almendro, y se agravará la langosta, y perderáse el apetito: porque el hombre va á la casa de su siglo, y los endechadores andarán en derredor por la plaza:
Antes que la cadena de plata se quiebre, y se rompa el cuenco de oro, y el cántaro se quiebre junto á la fuente, y la rueda sea rota sobre el pozo;
Y el polvo se torne á la tierra, como era, y el espíritu se vuelva á Dios que lo dió.
Vanidad de vanidades, dijo el Predicador, todo vanidad.
Y cuanto más sabio fué el Predicador, tanto más enseñó sabiduría al pueblo; é hizo escuchar, é hizo escudriñar, y compuso muchos proverbios.
Procuró el Predicador hallar palabras agradables, y escritura recta, palabras de verdad.
Las palabras de los sabios son como aguijones; y como clavos hincados, las de los maestros de las congregaciones, dadas por un Pastor.
Ahora, hijo mío, á más de esto, sé avisado. No hay fin de hacer muchos libros; y el mucho estudio aflicción es de la carne.
El fin de todo el discurso oído es este: Teme á Dios, y guarda sus mandamientos; porque esto es el todo del hombre.
Porque Dios traerá toda obra á juicio, el cual se hará sobre toda cosa oculta, buena ó mala.
Carga de Egipto. He aquí que Jehová monta sobre una ligera nube, y entrará en Egipto; y los ídolos de Egipto se moverán delante de él, y desleiráse el corazón de los Egipcios en medio de ellos.
Y revolveré Egipcios contra Egipcios, y cada uno peleará contra su hermano, cada uno contra su prójimo: ciudad contra ciudad, y reino contra reino.
Y el espíritu de Egipto se desvanecerá en medio de él, y destruiré su consejo; y preguntarán á sus imágenes, á sus mágicos, á sus pythones y á sus adivinos.
Y entregaré á Egipto en manos de señor duro; y rey violento se enseñoreará de ellos, dice el Señor Jehová de los ejércitos.
Y las aguas de la mar faltarán, y el río se agotará y secará.
Y alejaránse los ríos, se agotarán y secarán las corrientes de los fosos: la caña y el carrizo serán cortados.
Las verduras de junto al río, de junto á la ribera del río, y toda sementera del río, se secarán, se perderán, y no serán.
Los pescadores también se entristecerán; y harán duelo todos los que echan anzuelo en el río, y desfallecerán los que extienden red sobre las aguas.
Los que labran lino fino, y los que tejen redes, serán confundidos;
Porque todas sus redes serán rotas: y se entristecerán todos los que hacen viveros para peces.
Ciertamente son necios los príncipes de Zoán; el consejo de los prudentes consejeros de Faraón, se ha desvanecido. ¿Cómo diréis á Faraón: Yo soy hijo de los sabios, é hijo de los reyes antiguos?
¿Dónde están ahora aquellos tus prudentes? Dígante ahora, ó hágante saber qué es lo que Jehová de los ejércitos ha determinado sobre Egipto.
Hanse desvanecido los príncipes de Zoán, se han engañado los príncipes de Noph: engañaron á Egipto las esquinas de sus familias.
Jehová mezcló espíritu de vahido en medio de él; é hicieron errar á Egipto en toda su obra, como desatina el borracho en su vómito.
Y no aprovechará á Egipto cosa que haga la cabeza ó la cola, el ramo ó el junco.
En aquel día serán los Egipcios como mujeres; porque se asombrarán y temerán, en la presencia de la mano alta de Jehová de los ejércitos, que él ha de levantar sobre ellos.
Y la tierra de Judá será de espanto á Egipto; todo hombre que de ella se acordare se asombrará, por causa del consejo que Jehová de los ejércitos acordó sobre aquél.
En aquel tiempo habrá cinco ciudades en la tierra de Egipto que hablen la lengua de Canaán, y que juren por Jehová de los ejércitos: una será llamada la ciudad Herez.
En aquel tiempo habrá altar para Jehová en medio de la tierra de Egipto, y el trofeo de Jehová junto á su término.
Y será por señal y por testimonio á Jehová de los ejércitos en la tierra de Egipto: porque á Jehová clamarán á causa de sus opresores, y él les enviará salvador y príncipe que los libre.
Y Jehová será conocido de Egipto, y los de Egipto conocerán á Jehová en aquel día; y harán sacrificio y oblación; y harán votos á Jehová, y los cumplirán.
Y herirá Jehová á Egipto, herirá y sanará; y se convertirán á Jehová, y les será clemente, y los sanará.
En aquel tiempo habrá una calzada de Egipto á Asiria, y Asirios entrarán en Egipto, y Egipcios en Asiria; y los Egipcios servirán con los Asirios á Jehová.
En aquel tiempo, Israel será tercero con Egipto y con Asiria; será bendición en medio de la tierra;
Porque Jehová de los ejércitos los bendecirá, diciendo: Bendito el pueblo mío Egipto, y el Asirio obra de mis manos, é Israel mi heredad.
Y fué á mí palabra de Jehová, diciendo:
No tomarás para ti mujer, ni tendrás hijos ni hijas en este lugar.
Porque así ha dicho Jehová acerca de los hijos y de las hijas que nacieren en este lugar, y de sus madres que los parieren, y de los padres que los engendraren en esta tierra.
De dolorosas enfermedades morirán; no serán plañidos ni enterrados: serán por muladar sobre la haz de la tierra: y con cuchillo y con hambre serán consumidos, y sus cuerpos serán para comida de las aves del cielo y de las bestias de la tierra.
Porque así ha dicho Jehová: No entres en casa de luto, ni vayas á lamentar, ni los consueles: porque yo he quitado mi paz de este pueblo, dice Jehová, mi misericordia y piedades.
Y morirán en esta tierra grandes y chicos: no se enterrarán, ni los plañirán, ni se arañarán, ni se mesarán por ellos;
Ni por ellos partirán pan por luto, para consolarlos de sus muertos; ni les darán á beber vaso de consolaciones por su padre ó por su madre.
Asimismo no entres en casa de convite, para sentarte con ellos á comer ó á beber.
Porque así ha dicho Jehová de los ejércitos, Dios de Israel; He aquí que yo haré cesar en este lugar, delante de vuestros ojos y en vuestros días, toda voz de gozo y toda voz de alegría, toda voz de esposo y toda voz de esposa.
Y acontecerá que cuando anunciares á este pueblo todas estas cosas, te dirán ellos: ¿Por qué habló Jehová sobre nosotros todo este mal tan grande? ¿y qué maldad es la nuestra, ó qué pecado es el nuestro, que cometiéramos contra Jehová nuestro Dios?
Entonces les dirás: Porque vuestros padres me dejaron, dice Jehová, y anduvieron en pos de dioses ajenos, y los sirvieron, y á ellos se encorvaron, y me dejaron á mí, y no guardaron mi ley;
Y vosotros habéis hecho peor que vuestros padres; porque he aquí que vosotros camináis cada uno tras la imaginación de su malvado corazón, no oyéndome á mí.
Por tanto, yo os haré echar de esta tierra á tierra que ni vosotros ni vuestros padres habéis conocido, y allá serviréis á dioses ajenos de día y de noche; porque no os mostraré clemencia.
Empero he aquí, vienen días, dice Jehová, que no se dirá más: Vive Jehová, que hizo subir á los hijos de Israel de tierra de Egipto;
Sino: Vive Jehová, que hizo subir á los hijos de Israel de la tierra del aquilón, y de todas las tierras á donde los había arrojado: y volverélos á su tierra, la cual dí á sus padres.
He aquí que yo envío muchos pescadores, dice Jehová, y los pescarán; y después enviaré muchos cazadores, y los cazarán de todo monte, y de todo collado, y de las cavernas de los peñascos.
Porque mis ojos están sobre todos sus caminos, los cuales no se me ocultaron, ni su maldad se esconde de la presencia de mis ojos.
Mas primero pagaré al doble su iniquidad y su pecado; porque contaminaron mi tierra con los cuerpos muertos de sus abominaciones, y de sus abominaciones llenaron mi heredad.
Oh Jehová, fortaleza mía, y fuerza mía, y refugio mío en el tiempo de la aflicción; á ti vendrán gentes desde los extremos de la tierra, y dirán: Ciertamente mentira poseyeron nuestros padres, vanidad, y no hay en ellos provecho.
¿Ha de hacer el hombre dioses para sí? mas ellos no son dioses.
Por tanto, he aquí, les enseñaré de esta vez, enseñarles he mi mano y mi fortaleza, y sabrán que mi nombre es Jehová.
Porque he aquí que en aquellos días, y en aquel tiempo en que haré tornar la cautividad de Judá y de Jerusalem,
Juntaré todas las gentes, y harélas descender al valle de Josaphat, y allí entraré en juicio con ellos á causa de mi pueblo, y de Israel mi heredad, á los cuales esparcieron entre las naciones, y partieron mi tierra:
Y echaron suertes sobre mi pueblo, y á los niños dieron por una ramera, y vendieron las niñas por vino para beber.
Y también, ¿qué tengo yo con vosotras, Tiro y Sidón, y todos los términos de Palestina? ¿Queréis vengaros de mí? Y si de mí os vengáis, bien pronto haré yo recaer la paga sobre vuestra cabeza.
Porque habéis llevado mi plata y mi oro, y mis cosas preciosas y hermosas metisteis en vuestros templos:
Y vendisteis los hijos de Judá y los hijos de Jerusalem á los hijos de los Griegos, por alejarlos de sus términos.
He aquí los levantaré yo del lugar donde los vendisteis, y volveré vuestra paga sobre vuestra cabeza:
Y venderé vuestros hijos y vuestras hijas en la mano de los hijos de Judá, y ellos los venderán á los Sabeos, nación apartada; porque Jehová ha hablado.
Pregonad esto entre las gentes, proclamad guerra, despertad á los valientes, lléguense, vengan todos los hombres de guerra.
Haced espadas de vuestros azadones, lanzas de vuestras hoces; diga el flaco: Fuerte soy.
Juntaos y venid, gentes todas de alrededor, y congregaos: haz venir allí, oh Jehová, tus fuertes.
Las gentes se despierten, y suban al valle de Josaphat: porque allí me sentaré para juzgar todas las gentes de alrededor.
Echad la hoz, porque la mies está ya madura. Venid, descended; porque el lagar está lleno, rebosan las lagaretas: porque mucha es la maldad de ellos.
Muchos pueblos en el valle de la decisión: porque cercano está el día de Jehová en el valle de la decisión.
El sol y la luna se oscurecerán, y las estrellas retraerán su resplandor.
Y Jehová bramará desde Sión, y dará su voz desde Jerusalem, y temblarán los cielos y la tierra: mas Jehová será la esperanza de su pueblo, y la fortaleza de los hijos de Israel.
Y conoceréis que yo soy Jehová vuestro Dios, que habito en Sión, monte de mi santidad: y será Jerusalem santa, y extraños no pasarán más por ella.
Y será en aquel tiempo, que los montes destilarán mosto, y los collados fluirán leche, y por todos los arroyos de Judá correrán aguas: y saldrá una fuente de la casa de Jehová, y regará el valle de Sittim.
Egipto será destruído, y Edom será vuelto en asolado desierto, por la injuria hecha á los hijos de Judá: porque derramaron en su tierra la sangre inocente.
Mas Judá para siempre será habitada, y Jerusalem en generación y generación.
Y limpiaré la sangre de los que no limpié; y Jehová morará en Sión.
¡Ay de la ciudad ensuciada y contaminada y opresora!
No escuchó la voz, ni recibió la disciplina: no se confió en Jehová, no se acercó á su Dios.
Sus príncipes en medio de ella son leones bramadores: sus jueces, lobos de tarde que no dejan hueso para la mañana:
Sus profetas, livianos, hombres prevaricadores: sus sacerdotes contaminaron el santuario, falsearon la ley.
Jehová justo en medio de ella, no hará iniquidad: de mañana sacará á luz su juicio, nunca falta: mas el perverso no tiene vergüenza.
Hice talar gentes; sus castillos están asolados; hice desiertas sus calles, hasta no quedar quien pase: sus ciudades están asoladas hasta no quedar hombre, hasta no quedar morador.
Dije: Ciertamente me temerás, recibirás corrección; y no será su habitación derruída por todo aquello sobre que los visité. Mas ellos se levantaron de mañana, y corrompieron todas sus obras.
Por tanto, esperadme, dice Jehová, al día que me levantaré al despojo: porque mi determinación es reunir las gentes, juntar los reinos, para derramar sobre ellos mi enojo, todo el furor de mi ira; porque del fuego de mi celo será consumida toda la tierra.
Por entonces volveré yo á los pueblos el labio limpio, para que todos invoquen el nombre de Jehová, para que de un consentimiento le sirvan.
De esa parte de los ríos de Etiopía, mis suplicantes, la hija de mis esparcidos, me traerán ofrenda.
En aquel día no serás avergonzada por ninguna de tus obras con que te rebelaste contra mí; porque entonces quitaré de en medio de ti los que se alegran en tu soberbia, y nunca más te ensoberbecerás del monte de mi santidad.
Y dejaré en medio de ti un pueblo humilde y pobre, los cuales esperarán en el nombre de Jehová.
El resto de Israel no hará iniquidad, ni dirá mentira, ni en boca de ellos se hallará lengua engañosa: porque ellos serán apacentados y dormirán, y no habrá quien los espante.
Canta, oh hija de Sión: da voces de júbilo, oh Israel; gózate y regocíjate de todo corazón, hija de Jerusalem.
Jehová ha apartado tus juicios, ha echado fuera tus enemigos: Jehová es Rey de Israel en medio de ti; nunca más verás mal.
En aquel tiempo se dirá á Jerusalem: No temas: Sión, no se debiliten tus manos.
Jehová en medio de ti, poderoso, él salvará; gozaráse sobre ti con alegría, callará de amor, se regocijará sobre ti con cantar.
Reuniré á los fastidiados por causa del largo tiempo; tuyos fueron; para quienes el oprobio de ella era una carga.
He aquí, en aquel tiempo yo apremiaré á todos tus opresores; y salvaré la coja, y recogeré la descarriada; y pondrélos por alabanza y por renombre en todo país de confusión.
En aquel tiempo yo os traeré, en aquel tiempo os reuniré yo; pues os daré por renombre y por alabanza entre todos los pueblos de la tierra, cuando tornaré vuestros cautivos delante de vuestros ojos, dice Jehová.
Y venida la mañana, entraron en consejo todos los príncipes de los sacerdotes, y los ancianos del pueblo, contra Jesús, para entregarle á muerte.
Y le llevaron atado, y le entregaron á Poncio Pilato presidente.
Entonces Judas, el que le había entregado, viendo que era condenado, volvió arrepentido las treinta piezas de plata á los príncipes de los sacerdotes y á los ancianos,
Diciendo: Yo he pecado entregando la sangre inocente. Mas ellos dijeron: ¿Qué se nos da á nosotros? Viéraslo tú.
Y arrojando las piezas de plata en el templo, partióse; y fué, y se ahorcó.
Y los príncipes de los sacerdotes, tomando las piezas de plata, dijeron: No es lícito echarlas en el tesoro de los dones, porque es precio de sangre.
Mas habido consejo, compraron con ellas el campo del alfarero, por sepultura para los extranjeros.
Por lo cual fué llamado aquel campo, Campo de sangre, hasta el día de hoy.
Entonces se cumplió lo que fué dicho por el profeta Jeremías, que dijo: Y tomaron las treinta piezas de plata, precio del apreciado, que fué apreciado por los hijos de Israel;
Y las dieron para el campo del alfarero, como me ordenó el Señor.
Y Jesús estuvo delante del presidente; y el presidente le preguntó, diciendo: ¿Eres tú el Rey de los judíos? Y Jesús le dijo: Tú lo dices.
Y siendo acusado por los príncipes de los sacerdotes, y por los ancianos, nada respondió.
Pilato entonces le dice: ¿No oyes cuántas cosas testifican contra ti?
Y no le respondió ni una palabra; de tal manera que el presidente se maravillaba mucho.
Y en el día de la fiesta acostumbraba el presidente soltar al pueblo un preso, cual quisiesen.
Y tenían entonces un preso famoso que se llamaba Barrabás.
Y juntos ellos, les dijo Pilato: ¿Cuál queréis que os suelte? ¿á Barrabás, ó á Jesús que se dice el Cristo?
Porque sabía que por envidia le habían entregado.
Y estando él sentado en el tribunal, su mujer envió á él, diciendo: No tengas que ver con aquel justo; porque hoy he padecido muchas cosas en sueños por causa de él.
Mas los príncipes de los sacerdotes y los ancianos, persuadieron al pueblo que pidiese á Barrabás, y á Jesús matase.
Y respondiendo el presidente les dijo: ¿Cuál de los dos queréis que os suelte? Y ellos dijeron: A Barrabás.
Pilato les dijo: ¿Qué pues haré de Jesús que se dice el Cristo? Dícenle todos: Sea crucificado.
Y el presidente les dijo: Pues ¿qué mal ha hecho? Mas ellos gritaban más, diciendo: Sea crucificado.
Y viendo Pilato que nada adelantaba, antes se hacía más alboroto, tomando agua se lavó las manos delante del pueblo, diciendo: Inocente soy yo de la sangre de este justo: veréislo vosotros.
Y respondiendo todo el pueblo, dijo: Su sangre sea sobre nosotros, y sobre nuestros hijos.
Entonces les soltó á Barrabás: y habiendo azotado á Jesús, le entregó para ser crucificado.
Entonces los soldados del presidente llevaron á Jesús al pretorio, y juntaron á él toda la cuadrilla;
Y desnudándole, le echaron encima un manto de grana;
Y pusieron sobre su cabeza una corona tejida de espinas, y una caña en su mano derecha; é hincando la rodilla delante de él, le burlaban, diciendo: ¡Salve, Rey de los Judíos!
Y escupiendo en él, tomaron la caña, y le herían en la cabeza.
Y después que le hubieron escarnecido, le desnudaron el manto, y le vistieron de sus vestidos, y le llevaron para crucificarle.
Y saliendo, hallaron á un Cireneo, que se llamaba Simón: á éste cargaron para que llevase su cruz.
Y como llegaron al lugar que se llama Gólgotha, que es dicho, El lugar de la calavera,
Le dieron á beber vinagre mezclado con hiel; y gustando, no quiso beberlo.
Y después que le hubieron crucificado, repartieron sus vestidos, echando suertes: para que se cumpliese lo que fué dicho por el profeta: Se repartieron mis vestidos, y sobre mi ropa echaron suertes.
Y sentados le guardaban allí.
Y pusieron sobre su cabeza su causa escrita: ESTE ES JESUS EL REY DE LOS JUDIOS.
Entonces crucificaron con él dos ladrones, uno á la derecha, y otro á la izquierda.
Y los que pasaban, le decían injurias, meneando sus cabezas,
Y diciendo: Tú, el que derribas el templo, y en tres días lo reedificas, sálvate á ti mismo: si eres Hijo de Dios, desciende de la cruz.
De esta manera también los príncipes de los sacerdotes, escarneciendo con los escribas y los Fariseos y los ancianos, decían:
A otros salvó, á sí mismo no puede salvar: si es el Rey de Israel, descienda ahora de la cruz, y creeremos en él.
Confió en Dios: líbrele ahora si le quiere: porque ha dicho: Soy Hijo de Dios.
Lo mismo también le zaherían los ladrones que estaban crucificados con él.
Y desde la hora de sexta fueron tinieblas sobre toda la tierra hasta la hora de nona.
Y cerca de la hora de nona, Jesús exclamó con grande voz, diciendo: Eli, Eli, ¿lama sabachtani? Esto es: Dios mío, Dios mío, ¿por qué me has desamparado?
Y algunos de los que estaban allí, oyéndolo, decían: A Elías llama éste.
Y luego, corriendo uno de ellos, tomó una esponja, y la hinchió de vinagre, y poniéndola en una caña, dábale de beber.
Y los otros decían: Deja, veamos si viene Elías á librarle.
Mas Jesús, habiendo otra vez exclamado con grande voz, dió el espíritu.
Y he aquí, el velo del templo se rompió en dos, de alto á bajo: y la tierra tembló, y las piedras se hendieron;
Y abriéronse los sepulcros, y muchos cuerpos de santos que habían dormido, se levantaron;
Y salidos de los sepulcros, después de su resurrección, vinieron á la santa ciudad, y aparecieron á muchos.
Y el centurión, y los que estaban con él guardando á Jesús, visto el terremoto, y las cosas que habían sido hechas, temieron en gran manera, diciendo: Verdaderamente Hijo de Dios era éste.
Y estaban allí muchas mujeres mirando de lejos, las cuales habían seguido de Galilea á Jesús, sirviéndole:
Entre las cuales estaban María Magdalena, y María la madre de Jacobo y de José, y la madre de los hijos de Zebedeo.
Y como fué la tarde del día, vino un hombre rico de Arimatea, llamado José, el cual también había sido discípulo de Jesús.
Este llegó á Pilato, y pidió el cuerpo de Jesús: entonces Pilato mandó que se le diese el cuerpo.
Y tomando José el cuerpo, lo envolvió en una sábana limpia,
Y lo puso en su sepulcro nuevo, que había labrado en la peña: y revuelta una grande piedra á la puerta del sepulcro, se fué.
Y estaban allí María Magdalena, y la otra María, sentadas delante del sepulcro.
Y el siguiente día, que es después de la preparación, se juntaron los príncipes de los sacerdotes y los Fariseos á Pilato,
Diciendo: Señor, nos acordamos que aquel engañador dijo, viviendo aún: Después de tres días resucitaré.
Manda, pues, que se asegure el sepulcro hasta el día tercero; porque no vengan sus discípulos de noche, y le hurten, y digan al pueblo: Resucitó de los muertos. Y será el postrer error peor que el primero.
Y Pilato les dijo: Tenéis una guardia: id, aseguradlo como sabéis.
Y yendo ellos, aseguraron el sepulcro, sellando la piedra, con la guardia.
Y como fueron cerca de Jerusalem, de Bethphagé, y de Bethania, al monte de las Olivas, envía dos de sus discípulos,
Y les dice: Id al lugar que está delante de vosotros, y luego entrados en él, hallaréis un pollino atado, sobre el cual ningún hombre ha subido; desatadlo y traedlo.
Y si alguien os dijere: ¿Por qué hacéis eso? decid que el Señor lo ha menester: y luego lo enviará acá.
Y fueron, y hallaron el pollino atado á la puerta fuera, entre dos caminos; y le desataron.
Y unos de los que estaban allí, les dijeron: ¿Qué hacéis desatando el pollino?
Ellos entonces les dijeron como Jesús había mandado: y los dejaron.
Y trajeron el pollino á Jesús, y echaron sobre él sus vestidos, y se sentó sobre él.
Y muchos tendían sus vestidos por el camino, y otros cortaban hojas de los árboles, y las tendían por el camino.
Y los que iban delante, y los que iban detrás, daban voces diciendo: ¡Hosanna! Bendito el que viene en el nombre del Señor.
Bendito el reino de nuestro padre David que viene: ¡Hosanna en las alturas!
Y entró Jesús en Jerusalem, y en el templo: y habiendo mirado alrededor todas las cosas, y siendo ya tarde, salióse á Bethania con los doce.
Y el día siguiente, como salieron de Bethania, tuvo hambre.
Y viendo de lejos una higuera que tenía hojas, se acercó, si quizá hallaría en ella algo: y como vino á ella, nada halló sino hojas; porque no era tiempo de higos.
Entonces Jesús respondiendo, dijo á la higuera: Nunca más coma nadie fruto de ti para siempre. Y lo oyeron sus discípulos.
Vienen, pues, á Jerusalem; y entrando Jesús en el templo, comenzó á echar fuera á los que vendían y compraban en el templo; y trastornó las mesas de los cambistas, y las sillas de los que vendían palomas;
Y no consentía que alguien llevase vaso por el templo.
Y les enseñaba diciendo: ¿No está escrito que mi casa, casa de oración será llamada por todas las gentes? Mas vosotros la habéis hecho cueva de ladrones.
Y lo oyeron los escribas y los príncipes de los sacerdotes, y procuraban cómo le matarían; porque le tenían miedo, por cuanto todo el pueblo estaba maravillado de su doctrina.
Mas como fué tarde, Jesús salió de la ciudad.
Y pasando por la mañana, vieron que la higuera se había secado desde las raíces.
Entonces Pedro acordándose, le dice: Maestro, he aquí la higuera que maldijiste, se ha secado.
Y respondiendo Jesús, les dice: Tened fe en Dios.
Porque de cierto os digo que cualquiera que dijere á este monte: Quítate, y échate en la mar, y no dudare en su corazón, mas creyere que será hecho lo que dice, lo que dijere le será hecho.
Por tanto, os digo que todo lo que orando pidiereis, creed que lo recibiréis, y os vendrá.
Y cuando estuviereis orando, perdonad, si tenéis algo contra alguno, para que vuestro Padre que está en los cielos os perdone también á vosotros vuestras ofensas.
Porque si vosotros no perdonareis, tampoco vuestro Padre que está en los cielos os perdonará vuestras ofensas.
Y volvieron á Jerusalem; y andando él por el templo, vienen á él los príncipes de los sacerdotes, y los escribas, y los ancianos;
Y le dicen: ¿Con qué facultad haces estas cosas? ¿y quién te ha dado esta facultad para hacer estas cosas?
Y Jesús respondiendo entonces, les dice: Os preguntaré también yo una palabra; y respondedme, y os diré con qué facultad hago estas cosas:
El bautismo de Juan, ¿era del cielo, ó de los hombres? Respondedme.
Entonces ellos pensaron dentro de sí, diciendo: Si dijéremos, del cielo, dirá: ¿Por qué, pues, no le creísteis?
Y si dijéremos, de los hombres, tememos al pueblo: porque todos juzgaban de Juan, que verdaderamente era profeta.
Y respondiendo, dicen á Jesús: No sabemos. Entonces respondiendo Jesús, les dice: Tampoco yo os diré con qué facultad hago estas cosas.
Entonces Pablo, poniendo los ojos en el concilio, dice: Varones hermanos, yo con toda buena conciencia he conversado delante de Dios hasta el día de hoy.
El príncipe de los sacerdotes, Ananías, mandó entonces á los que estaban delante de él, que le hiriesen en la boca.
Entonces Pablo le dijo: Herirte ha Dios, pared blanqueada: ¿y estás tú sentado para juzgarme conforme á la ley, y contra la ley me mandas herir?
Y los que estaban presentes dijeron: ¿Al sumo sacerdote de Dios maldices?
Y Pablo dijo: No sabía, hermanos, que era el sumo sacerdote; pues escrito está: Al príncipe de tu pueblo no maldecirás.
Entonces Pablo, sabiendo que la una parte era de Saduceos, y la otra de Fariseos, clamó en el concilio: Varones hermanos, yo soy Fariseo, hijo de Fariseo: de la esperanza y de la resurrección de los muertos soy yo juzgado.
Y como hubo dicho esto, fué hecha disensión entre los Fariseos y los Saduceos; y la multitud fué dividida.
Porque los Saduceos dicen que no hay resurrección, ni ángel, ni espíritu; mas los Fariseos confiesan ambas cosas.
Y levantóse un gran clamor: y levantándose los escribas de la parte de los Fariseos, contendían diciendo: Ningún mal hallamos en este hombre; que si espíritu le ha hablado, ó ángel, no resistamos á Dios.
Y habiendo grande disensión, el tribuno, teniendo temor de que Pablo fuese despedazado de ellos, mandó venir soldados, y arrebatarle de en medio de ellos, y llevarle á la fortaleza.
Y la noche siguiente, presentándosele el Señor, le dijo: Confía, Pablo; que como has testificado de mí en Jerusalem, así es menester testifiques también en Roma.
Y venido el día, algunos de los Judíos se juntaron, é hicieron voto bajo de maldición, diciendo que ni comerían ni beberían hasta que hubiesen muerto á Pablo.
Y eran más de cuarenta los que habían hecho esta conjuración;
Los cuales se fueron á los príncipes de los sacerdotes y á los ancianos, y dijeron: Nosotros hemos hecho voto debajo de maldición, que no hemos de gustar nada hasta que hayamos muerto á Pablo.
Ahora pues, vosotros, con el concilio, requerid al tribuno que le saque mañana á vosotros como que queréis entender de él alguna cosa más cierta; y nosotros, antes que él llegue, estaremos aparejados para matarle.
Entonces un hijo de la hermana de Pablo, oyendo las asechanzas, fué, y entró en la fortaleza, y dió aviso á Pablo.
Y Pablo, llamando á uno de los centuriones, dice: Lleva á este mancebo al tribuno, porque tiene cierto aviso que darle.
El entonces tomándole, le llevó al tribuno, y dijo: El preso Pablo, llamándome, me rogó que trajese á ti este mancebo, que tiene algo que hablarte.
Y el tribuno, tomándole de la mano y retirándose aparte, le preguntó: ¿Qué es lo que tienes que decirme?
Y él dijo: Los Judíos han concertado rogarte que mañana saques á Pablo al concilio, como que han de inquirir de él alguna cosa más cierta.
Mas tú no los creas; porque más de cuarenta hombres de ellos le acechan, los cuales han hecho voto debajo de maldición, de no comer ni beber hasta que le hayan muerto; y ahora están apercibidos esperando tu promesa.
Entonces el tribuno despidió al mancebo, mandándole que á nadie dijese que le había dado aviso de esto.
Y llamados dos centuriones, mandó que apercibiesen para la hora tercia de la noche doscientos soldados, que fuesen hasta Cesarea, y setenta de á caballo, y doscientos lanceros;
Y que aparejasen cabalgaduras en que poniendo á Pablo, le llevasen en salvo á Félix el Presidente.
Y escribió una carta en estos términos:
Claudio Lisias al excelentísimo gobernador Félix: Salud.
A este hombre, aprehendido de los Judíos, y que iban ellos á matar, libré yo acudiendo con la tropa, habiendo entendido que era Romano.
Y queriendo saber la causa por qué le acusaban, le llevé al concilio de ellos:
Y hallé que le acusaban de cuestiones de la ley de ellos, y que ningún crimen tenía digno de muerte ó de prisión.
Mas siéndome dado aviso de asechanzas que le habían aparejado los Judíos, luego al punto le he enviado á ti, intimando también á los acusadores que traten delante de ti lo que tienen contra él. Pásalo bien.
Y los soldados, tomando á Pablo como les era mandado, lleváronle de noche á Antipatris.
Y al día siguiente, dejando á los de á caballo que fuesen con él, se volvieron á la fortaleza.
Y como llegaron á Cesarea, y dieron la carta al gobernador, presentaron también á Pablo delante de él.
Y el gobernador, leída la carta, preguntó de qué provincia era; y entendiendo que de Cilicia,
Te oiré, dijo, cuando vinieren tus acusadores. Y mandó que le guardasen en el pretorio de Herodes.
Por lo cual eres inexcusable, oh hombre, cualquiera que juzgas: porque en lo que juzgas á otro, te condenas á ti mismo; porque lo mismo haces, tú que juzgas.
Mas sabemos que el juicio de Dios es según verdad contra los que hacen tales cosas.
¿Y piensas esto, oh hombre, que juzgas á los que hacen tales cosas, y haces las mismas, que tú escaparás del juicio de Dios?
¿O menosprecias las riquezas de su benignidad, y paciencia, y longanimidad, ignorando que su benignidad te guía á arrepentimiento?
Mas por tu dureza, y por tu corazón no arrepentido, atesoras para ti mismo ira para el día de la ira y de la manifestación del justo juicio de Dios;
El cual pagará á cada uno conforme á sus obras:
A los que perseverando en bien hacer, buscan gloria y honra é inmortalidad, la vida eterna.
Mas á los que son contenciosos, y no obedecen á la verdad, antes obedecen á la injusticia, enojo é ira;
Tribulación y angustia sobre toda persona humana que obra lo malo, el Judío primeramente, y también el Griego:
Mas gloria y honra y paz á cualquiera que obra el bien, al Judío primeramente, y también al Griego.
Porque no hay acepción de personas para con Dios.
Porque todos los que sin ley pecaron, sin ley también perecerán; y todos los que en la ley pecaron, por la ley serán juzgados:
Porque no los oidores de la ley son justos para con Dios, mas los hacedores de la ley serán justificados.
Porque los Gentiles que no tienen ley, naturalmente haciendo lo que es de la ley, los tales, aunque no tengan ley, ellos son ley á sí mismos:
Mostrando la obra de la ley escrita en sus corazones, dando testimonio juntamente sus conciencias, y acusándose y también excusándose sus pensamientos unos con otros;
En el día que juzgará el Señor lo encubierto de los hombres, conforme á mi evangelio, por Jesucristo.
He aquí, tú tienes el sobrenombre de Judío, y estás reposado en la ley, y te glorías en Dios,
Y sabes su voluntad, y apruebas lo mejor, instruído por la ley;
Y confías que eres guía de los ciegos, luz de los que están en tinieblas,
Enseñador de los que no saben, maestro de niños, que tienes la forma de la ciencia y de la verdad en la ley:
Tú pues, que enseñas á otro, ¿no te enseñas á ti mismo? ¿Tú, que predicas que no se ha de hurtar, hurtas?
¿Tú, que dices que no se ha de adulterar, adulteras? ¿Tú, que abominas los ídolos, cometes sacrilegio?
¿Tú, que te jactas de la ley, con infracción de la ley deshonras á Dios?
Porque el nombre de Dios es blasfemado por causa de vosotros entre los Gentiles, como está escrito.
Porque la circuncisión en verdad aprovecha, si guardares la ley; mas si eres rebelde á la ley, tu circuncisión es hecha incircuncisión.
De manera que, si el incircunciso guardare las justicias de la ley, ¿no será tenida su incircuncisión por circuncisión?
Y lo que de su natural es incircunciso, guardando perfectamente la ley, te juzgará á ti, que con la letra y con la circuncisión eres rebelde á la ley.
Porque no es Judío el que lo es en manifiesto; ni la circuncisión es la que es en manifiesto en la carne:
Mas es Judío el que lo es en lo interior; y la circuncisión es la del corazón, en espíritu, no en letra; la alabanza del cual no es de los hombres, sino de Dios.
Esto también sepas, que en los postreros días vendrán tiempos peligrosos:
Que habrá hombres amadores de sí mismos, avaros, vanagloriosos, soberbios, detractores, desobedientes á los padres, ingratos, sin santidad,
Sin afecto, desleales, calumniadores, destemplados, crueles, aborrecedores de lo bueno,
Traidores, arrebatados, hinchados, amadores de los deleites más que de Dios;
Teniendo apariencia de piedad, mas habiendo negado la eficacia de ella: y á éstos evita.
Porque de éstos son los que se entran por las casas, y llevan cautivas las mujercillas cargadas de pecados, llevadas de diversas concupiscencias;
Que siempre aprenden, y nunca pueden acabar de llegar al conocimiento de la verdad.
Y de la manera que Jannes y Jambres resistieron á Moisés, así también éstos resisten á la verdad; hombres corruptos de entendimiento, réprobos acerca de la fe.
Mas no prevalecerán; porque su insensatez será manifiesta á todos, como también lo fué la de aquéllos.
Pero tú has comprendido mi doctrina, instrucción, intento, fe, largura de ánimo, caridad, paciencia,
Persecuciones, aflicciones, cuales me sobrevinieron en Antioquía, en Iconio, en Listra, cuales persecuciones he sufrido; y de todas me ha librado el Señor.
Y también todos los que quieren vivir píamente en Cristo Jesús, padecerán persecución.
Mas los malos hombres y los engañadores, irán de mal en peor, engañando y siendo engañados.
Empero persiste tú en lo que has aprendido y te persuadiste, sabiendo de quién has aprendido;
Y que desde la niñez has sabido las Sagradas Escrituras, las cuales te pueden hacer sabio para la salud por la fe que es en Cristo Jesús.
Toda Escritura es inspirada divinamente y útil para enseñar, para redargüir, para corregir, para instituir en justicia,
Para que el hombre de Dios sea perfecto, enteramente instruído para toda buena obra.
Y una grande señal apareció en el cielo: una mujer vestida del sol, y la luna debajo de sus pies, y sobre su cabeza una corona de doce estrellas.
Y estando preñada, clamaba con dolores de parto, y sufría tormento por parir.
Y fué vista otra señal en el cielo: y he aquí un grande dragón bermejo, que tenía siete cabezas y diez cuernos, y en sus cabezas siete diademas.
Y su cola arrastraba la tercera parte de las estrellas del cielo, y las echó en tierra. Y el dragón se paró delante de la mujer que estaba para parir, á fin de devorar á su hijo cuando hubiese parido.
Y ella parió un hijo varón, el cual había de regir todas las gentes con vara de hierro: y su hijo fué arrebatado para Dios y á su trono.
Y la mujer huyó al desierto, donde tiene lugar aparejado de Dios, para que allí la mantengan mil doscientos y sesenta días.
Y fué hecha una grande batalla en el cielo: Miguel y sus ángeles lidiaban contra el dragón; y lidiaba el dragón y sus ángeles,
Y no prevalecieron, ni su lugar fué más hallado en el cielo.
Y fué lanzado fuera aquel gran dragón, la serpiente antigua, que se llama Diablo y Satanás, el cual engaña á todo el mundo; fué arrojado en tierra, y sus ángeles fueron arrojados con él.
Y oí una grande voz en el cielo que decía: Ahora ha venido la salvación, y la virtud, y el reino de nuestro Dios, y el poder de su Cristo; porque el acusador de nuestros hermanos ha sido arrojado, el cual los acusaba delante de nuestro Dios día y noche.
Y ellos le han vencido por la sangre del Cordero, y por la palabra de su testimonio; y no han amado sus vidas hasta la muerte.
Por lo cual alegraos, cielos, y los que moráis en ellos. ¡Ay de los moradores de la tierra y del mar! porque el diablo ha descendido á vosotros, teniendo grande ira, sabiendo que tiene poco tiempo.
Y cuando vió el dragón que él había sido arrojado á la tierra, persiguió á la mujer que había parido al hijo varón.
Y fueron dadas á la mujer dos alas de grande águila, para que de la presencia de la serpiente volase al desierto, á su lugar, donde es mantenida por un tiempo, y tiempos, y la mitad de un tiempo.
Y la serpiente echó de su boca tras la mujer agua como un río, á fin de hacer que fuese arrebatada del río.
Y la tierra ayudó á la mujer, y la tierra abrió su boca, y sorbió el río que había echado el dragón de su boca.
Entonces el dragón fué airado contra la mujer; y se fué á hacer guerra contra los otros de la simiente de ella, los cuales guardan los mandamientos de Dios, y tienen el testimonio de Jesucristo.
Y vino uno de los siete ángeles que tenían las siete copas, y habló conmigo, diciéndome: Ven acá, y te mostraré la condenación de la grande ramera, la cual está sentada sobre muchas aguas:
Con la cual han fornicado los reyes de la tierra, y los que moran en la tierra se han embriagado con el vino de su fornicación.
Y me llevó en Espíritu al desierto; y vi una mujer sentada sobre una bestia bermeja llena de nombres de blasfemia y que tenía siete cabezas y diez cuernos.
Y la mujer estaba vestida de púrpura y de escarlata, y dorada con oro, y adornada de piedras preciosas y de perlas, teniendo un cáliz de oro en su mano lleno de abominaciones, y de la suciedad de su fornicación;
Y en su frente un nombre escrito: MISTERIO, BABILONIA LA GRANDE, LA MADRE DE LAS FORNICACIONES Y DE LAS ABOMINACIONES DE LA TIERRA.
Y vi la mujer embriagada de la sangre de los santos, y de la sangre de los mártires de Jesús: y cuando la vi, quedé maravillado de grande admiración.
Y el ángel me dijo: ¿Por qué te maravillas? Yo te diré el misterio de la mujer, y de la bestia que la trae, la cual tiene siete cabezas y diez cuernos.
La bestia que has visto, fué, y no es; y ha de subir del abismo, y ha de ir á perdición: y los moradores de la tierra, cuyos nombres no están escritos en el libro de la vida desde la fundación del mundo, se maravillarán viendo la bestia que era y no es, aunque es.
Y aquí hay mente que tiene sabiduría. Las siete cabezas son siete montes, sobre los cuales se asienta la mujer.
Y son siete reyes. Los cinco son caídos; el uno es, el otro aun no es venido; y cuando viniere, es necesario que dure breve tiempo.
Y la bestia que era, y no es, es también el octavo, y es de los siete, y va á perdición.
Y los diez cuernos que has visto, son diez reyes, que aun no han recibido reino; mas tomarán potencia por una hora como reyes con la bestia.
Estos tienen un consejo, y darán su potencia y autoridad á la bestia.
Ellos pelearán contra el Cordero, y el Cordero los vencerá, porque es el Señor de los señores, y el Rey de los reyes: y los que están con él son llamados, y elegidos, y fieles.
Y él me dice: Las aguas que has visto donde la ramera se sienta, son pueblos y muchedumbres y naciones y lenguas.
Y los diez cuernos que viste en la bestia, éstos aborrecerán á la ramera, y la harán desolada y desnuda: y comerán sus carnes, y la quemarán con fuego:
Porque Dios ha puesto en sus corazones ejecutar lo que le plugo, y el ponerse de acuerdo, y dar su reino á la bestia, hasta que sean cumplidas las palabras de Dios.
Y la mujer que has visto, es la grande ciudad que tiene reino sobre los reyes de la tierra.
